"""The Starlette app of the viewer, its token check, and :func:`serve` (uvicorn).

Needs the ``ui`` extra (``pip install 'objstore-saver[ui]'``). Handlers are
plain functions, which Starlette runs in its thread pool: the views run on the
blocking driver.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import ipaddress
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from objstore_saver.driver import Driver
from objstore_saver.errors import CorruptObjectError, InvalidIdentifierError
from objstore_saver.longterm.records import to_micros
from objstore_saver.ops._common import SubPlan, never_cancel, no_progress, redact
from objstore_saver.ops.checkpoint_reading import checkpoint_plan
from objstore_saver.ops.object_views import object_plan
from objstore_saver.ops.views import du_plan
from objstore_saver.storage.base import ObjectStore
from objstore_saver.viewer import api, longterm, pages, store_pages
from objstore_saver.viewer.api import BadRequestError, NotFoundError
from objstore_saver.viewer.reading import REFERRER_MANIFESTS, referrers_plan

#: Largest page a client may ask for.
MAX_PAGE = 200
#: Environment variable holding the token (``--token`` wins).
TOKEN_ENV = "OBJSTORE_SAVER_VIEWER_TOKEN"
#: Cookie set from a ``?token=`` link so the pages' own links keep working.
TOKEN_COOKIE = "objstore_viewer_token"


class TokenMiddleware(BaseHTTPMiddleware):
    """Answer 401 unless the request carries the token (header, cookie or ``?token=``)."""

    def __init__(self, app: Any, token: str) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        header = request.headers.get("authorization", "")
        given = [
            header[7:] if header.lower().startswith("bearer ") else "",
            request.cookies.get(TOKEN_COOKIE, ""),
            request.query_params.get("token", ""),
        ]
        # Bytes: compare_digest refuses non-ASCII str, and a token may be anything.
        want = self.token.encode()
        if not any(g and hmac.compare_digest(g.encode(), want) for g in given):
            return JSONResponse({"error": "a valid token is required"}, status_code=401)
        response = await call_next(request)
        if request.query_params.get("token"):
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
        return response


def _page(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise BadRequestError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    return limit


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequestError(f"query parameter {name!r} must be an integer, got {raw!r}") from None


def _labels(request: Request) -> tuple[str, ...]:
    """The namespace of a store page, one ``label`` parameter per label; empty ones (an
    empty search box) are dropped, as LangGraph refuses them."""
    return tuple(label for label in request.query_params.getlist("label") if label)


def _segments(request: Request, prefix: str) -> list[str]:
    """The percent-decoded segments of the request path after ``prefix``, from the raw path:
    a segment may hold an encoded "/" (``%2F``), which the decoded path would split."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    path = raw.decode("utf-8", "replace")
    if not path.startswith(prefix):
        raise NotFoundError(f"no page at {request.url.path!r}")
    return [unquote(seg) for seg in path[len(prefix) :].split("/")]


def _endpoint(
    render: Callable[[Any], str] | None, view: Callable[[Request], Any], hidden: list[str]
) -> Callable[[Request], Response]:
    """A page (``render``: its HTML) or, without ``render``, its JSON; ``hidden`` never shown."""

    def error(status: int, message: str, key: str | None = None) -> Response:
        message = redact(message, hidden)
        if render is None:
            return JSONResponse({"error": message, "key": key}, status_code=status)
        return HTMLResponse(pages.error_page(status, message, key), status_code=status)

    def endpoint(request: Request) -> Response:
        try:
            result = view(request)
        except NotFoundError as exc:
            return error(404, str(exc))
        except BadRequestError as exc:
            return error(400, str(exc))
        except CorruptObjectError as exc:
            return error(422, exc.reason, exc.key)
        if render is None:
            return JSONResponse(result)
        return HTMLResponse(redact(render(result), hidden))

    return endpoint


def create_app(
    store: ObjectStore, *, token: str | None = None, secrets: list[str] | None = None
) -> Starlette:
    """The viewer app over ``store`` (only read); with ``token``, every request must carry
    it; ``secrets`` (passwords in the configured URL) are never shown."""
    driver = Driver(store, max_workers=16)
    handle = functools.partial(_endpoint, hidden=list(secrets or []))

    def run(plan: SubPlan, *, value_error: bool = False) -> Any:
        """Run a view's plan; with ``value_error`` a ValueError is the request's fault (400)."""
        try:
            return driver.run(plan)
        except InvalidIdentifierError as exc:
            raise BadRequestError(str(exc)) from exc
        except longterm.StoreLookupError as exc:
            raise NotFoundError(str(exc)) from exc
        except ValueError as exc:
            if not value_error:
                raise
            raise BadRequestError(str(exc)) from exc

    def threads(r: Request) -> Any:
        search, after = r.query_params.get("q", ""), r.query_params.get("after") or None
        return run(api.threads_page_plan(search, after, _page(_int(r, "limit", 50))))

    def checkpoint(tid: str, cid: str | None, ns: str) -> Any:
        """A checkpoint decoded to JSON as ``show`` gives it, its corrupt parts in ``errors``."""
        report = run(checkpoint_plan(tid, cid, ns, collect_errors=True))
        if report is None:
            what = "the latest checkpoint" if cid is None else f"{cid!r}"
            raise NotFoundError(f"thread {tid!r} (namespace {ns!r}) has no checkpoint {what}")
        return report

    def thread_view(r: Request, prefix: str) -> tuple[Callable[[Any], str], Any]:
        """A page under a thread: its HTML renderer and its data."""
        tid, *rest = _segments(r, prefix)
        ns = r.query_params.get("ns", "")
        match rest:
            case []:
                after, limit = r.query_params.get("after") or None, _int(r, "limit", 50)
                return pages.thread_page, run(api.thread_page_plan(tid, after, _page(limit)))
            case ["latest"]:
                return pages.checkpoint_page, checkpoint(tid, None, ns)
            case ["checkpoints", cid]:
                return pages.checkpoint_page, checkpoint(tid, cid, ns)
            case ["diff", cid]:
                against = r.query_params.get("against") or None
                new = checkpoint(tid, cid, ns)
                old_id = against or new["parent_checkpoint_id"]
                if old_id is None:
                    raise NotFoundError(f"checkpoint {cid!r} of thread {tid!r} has no parent")
                diff = api.diff_of(checkpoint(tid, old_id, ns), new)
                return functools.partial(pages.diff_page, tid), diff
        raise NotFoundError(f"no page at {r.url.path!r}")

    def storage(r: Request, prefix: str) -> Any:
        segs = _segments(r, prefix)
        if len(segs) != 1:
            raise NotFoundError(f"no page at {r.url.path!r}")
        return run(api.thread_storage_plan(segs[0]))

    def one_object(r: Request, prefix: str) -> Any:
        key = "/".join(_segments(r, prefix))
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise BadRequestError(f"key {key!r} is not a key of the store")
        report, reason = run(object_plan(key), value_error=True)
        if report is None:
            raise NotFoundError(reason)
        if r.query_params.get("referrers"):
            after = r.query_params.get("after") or None
            limit = _page(_int(r, "limit", REFERRER_MANIFESTS))
            report["referrers"] = run(referrers_plan(key, after, limit), value_error=True)
        return report

    def store_namespaces(r: Request, _: str) -> Any:
        after = r.query_params.get("after") or None
        limit = _page(_int(r, "limit", 50))
        return run(longterm.namespaces_plan(_labels(r), after, limit, to_micros(time.time())))

    def store_namespace(r: Request, _: str) -> Any:
        namespace, offset, limit = _labels(r), _int(r, "offset", 0), _int(r, "limit", 50)
        if not namespace:
            raise BadRequestError("give the namespace as one 'label' parameter per label")
        if offset < 0:
            raise BadRequestError(f"offset must be at least 0, got {offset}")
        plan = longterm.namespace_plan(namespace, offset, _page(limit), to_micros(time.time()))
        return run(plan)

    def store_item(r: Request, _: str) -> Any:
        namespace, key = _labels(r), r.query_params.get("key")
        if key is None:
            raise BadRequestError("query parameter 'key' (the item's key) is missing")
        if not namespace:
            raise BadRequestError(f"namespace of key {key!r} is empty: give 'label' parameters")
        return run(longterm.item_plan(namespace, key, to_micros(time.time())))

    def page_and_api(
        path: str, render: Callable[[Any], str], view: Callable[[Request, str], Any]
    ) -> list[Route]:
        """The page at ``path`` and its JSON at ``/api`` + ``path``; ``view`` gets the path's
        part before its parameter (what :func:`_segments` cuts off)."""
        cut = path.partition("{")[0]
        return [
            Route("/api" + path, handle(None, lambda r: view(r, "/api" + cut))),
            Route(path, handle(render, lambda r: view(r, cut))),
        ]

    routes = [
        Route("/api/threads", handle(None, threads)),
        Route("/", handle(pages.threads_page, threads)),
        Route("/threads", lambda r: RedirectResponse("/")),
        Route(
            "/api/threads/{rest:path}", handle(None, lambda r: thread_view(r, "/api/threads/")[1])
        ),
        Route(
            "/threads/{rest:path}",
            handle(lambda v: v[0](v[1]), lambda r: thread_view(r, "/threads/")),
        ),
        *page_and_api("/objects/{key:path}", pages.object_page, one_object),
        *page_and_api("/storage/{rest:path}", pages.storage_page, storage),
        *page_and_api(
            "/storage", pages.du_page, lambda r, _: run(du_plan(no_progress, never_cancel))
        ),
        *page_and_api("/store", store_pages.store_page, store_namespaces),
        *page_and_api("/store/ns", store_pages.namespace_page, store_namespace),
        *page_and_api("/store/item", store_pages.item_page, store_item),
    ]
    middleware = [Middleware(TokenMiddleware, token=token)] if token else []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            driver.close()

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(store: ObjectStore, host: str, port: int, token: str | None, secrets: list[str]) -> None:
    """Run the viewer with uvicorn until interrupted (ValueError: ``host`` is not loopback
    and no token is given)."""
    import uvicorn

    if not is_loopback(host) and not token:
        raise ValueError(
            f"--host {host} is not loopback: give --token (or ${TOKEN_ENV}) to protect the viewer"
        )
    uvicorn.run(
        create_app(store, token=token, secrets=secrets), host=host, port=port, log_level="info"
    )
