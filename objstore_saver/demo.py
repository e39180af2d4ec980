"""A short demo: a LangGraph chat persisted in a local directory, read back and audited.

Run ``python -m objstore_saver.demo [DIRECTORY]``. The chat bot is a
deterministic stand-in for a model, so the demo needs no API key and no server.

The audit is the one docs/auditing.md describes: every stored file is read
with ``msgpack`` and ``zstandard`` only (no code of this package), content
objects are checked against their SHA-256 names, and the newest checkpoint's
``messages`` are decoded from its bytes and compared with what LangGraph read
back; then the saver's own ``verify`` (an fsck) checks the thread. The exit
status is 1 when either finds a problem.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.parse
import uuid
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import msgpack
import zstandard

from objstore_saver.plans.verify_report import VerifyReport
from objstore_saver.saver import ObjectStoreSaver


def _build_graph(saver: ObjectStoreSaver):  # type: ignore[no-untyped-def]
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def bot(state: MessagesState) -> dict:
        question = state["messages"][-1].content
        turn = sum(1 for m in state["messages"] if m.type == "human")
        return {"messages": [AIMessage(f"(turn {turn}) You said: {question!s}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


#: What each kind of key is (docs/spec.md §3), in the order the demo prints them.
KINDS = {
    "manifests": "checkpoints (manifests)",
    "writes": "pending writes",
    "tombstones": "tombstones",
    "objects": "content objects",
    "runs": "run markers",
    "marks": "sweep marks",
    "other": "other keys",
}


def kind_of(key: str) -> str:
    """The kind of a stored key (``threads/<T>/checkpoints/<N>/<R>.2`` is a manifest...)."""
    parts = key.split("/")
    if parts[0] == "runs":
        return "runs"  # the index from a run to its threads
    if parts[0] != "threads" or len(parts) < 4:
        return "other"  # keys/, store/, jobs/: not written by this demo
    if parts[2] != "checkpoints":
        return parts[2] if parts[2] in KINDS else "other"
    if len(parts) > 5 and parts[4].endswith(".w"):
        return "writes"
    return "tombstones" if parts[4].startswith("-") else "manifests"


class AuditError(Exception):
    """The stored bytes do not say what the saver read back."""


@dataclass
class Audit:
    """What :func:`audit` read: objects and bytes by kind, and the newest conversation."""

    objects: Counter[str] = field(default_factory=Counter)
    bytes: Counter[str] = field(default_factory=Counter)
    embedded: int = 0
    hashed: int = 0
    messages: list[tuple[str, str]] = field(default_factory=list)


def _unpack(data: bytes) -> Any:
    def ext(code: int, body: bytes) -> Any:  # LangGraph's typed values: [module, class, fields...]
        return msgpack.unpackb(body, raw=False, ext_hook=ext, strict_map_key=False)

    return msgpack.unpackb(data, raw=False, ext_hook=ext, strict_map_key=False)


def _d1() -> zstandard.ZstdCompressionDict:  # the dictionary of encoding zd1 (spec §4.0)
    data = resources.files("objstore_saver.format").joinpath("zdict/d1.bin").read_bytes()
    return zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


class _Reader:
    """Follows one manifest's references as docs/auditing.md's ``audit.py`` does."""

    def __init__(self, manifest: Path) -> None:
        self.manifest = manifest
        self.thread = manifest.parents[2]  # threads/<T>/checkpoints/<N>/<R>.2
        self.d1 = _d1()

    def _embedded(self, manifest: Path) -> dict[bytes, bytes]:
        if not manifest.exists():
            return {}
        m = msgpack.unpackb(manifest.read_bytes(), raw=False)
        return {hashlib.sha256(b).digest(): b for b in m.get("e", [])}

    def fetch(self, digest: bytes, loc: Any) -> dict[str, Any]:
        """The object ``digest``: embedded in the manifest ``loc`` names, or alone."""
        if loc is not None:
            if loc == "":
                manifest = self.manifest
            else:
                cid = str(uuid.UUID(bytes=loc)) if isinstance(loc, bytes) else loc
                rid = bytes(255 - b for b in cid.encode()).hex() + "~.2"
                manifest = self.manifest.parent / rid
            body = self._embedded(manifest).get(digest)
            if body is not None:
                return msgpack.unpackb(body, raw=False)
        path = self.thread / "objects" / digest.hex()
        if not path.exists():
            raise AuditError(f"{self.manifest.name} refers to {digest.hex()}, stored nowhere")
        body = path.read_bytes()
        if hashlib.sha256(body).digest() != digest:
            raise AuditError(f"{path} does not hash to its name")
        return msgpack.unpackb(body, raw=False)

    def payload(self, type_: str, enc: str, data: bytes) -> Any:
        if enc in ("zstd", "zd1"):
            dictionary = self.d1 if enc == "zd1" else None
            data = zstandard.ZstdDecompressor(dict_data=dictionary).decompress(data)
        if type_ != "msgpack":
            raise AuditError(f"a value of serializer type {type_!r}, not read by this demo")
        return _unpack(data)

    def value(self, entry: list[Any]) -> Any:
        """An entry's value: ``i`` inline, ``b`` a value object, ``L`` a list."""
        if entry[0] == "i":
            return self.payload(*entry[1:])
        if entry[0] == "b":
            return self.payload(*self.fetch(entry[1], entry[2] if len(entry) == 3 else None)["p"])
        if entry[0] == "L":
            out = []
            for seg in entry[2]:
                out += [
                    self.value(e)
                    for e in self.fetch(seg[0], seg[2] if len(seg) == 3 else None)["x"]
                ]
            return out + [self.value(e) for e in entry[3]]
        raise AuditError(f"an entry of tag {entry[0]!r} (parts, split), not followed by this demo")


def _token(identifier: str) -> str:  # spec §3.1
    q = urllib.parse.quote(identifier, safe="")  # keeps A-Z a-z 0-9 - . _ ~
    return "_" + q if len(q) <= 200 else "~" + hashlib.sha256(identifier.encode()).hexdigest()


def audit(root: Path, thread_id: str) -> Audit:
    """Read every stored file under ``root`` with msgpack and zstandard only (docs/auditing.md).

    Every thread file but run markers must be a MessagePack map with a format
    ``f`` and a kind ``k``, a content object must hash to its name; the newest
    root manifest of ``thread_id`` gives :attr:`Audit.messages`. Raises
    :class:`AuditError` naming the first file at fault.
    """
    found = Audit()
    keys = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    for key in keys:
        data = (root / key).read_bytes()
        kind = kind_of(key)
        found.objects[kind] += 1
        found.bytes[kind] += len(data)
        if kind in ("runs", "other"):
            continue  # run markers are empty; the rest is not the checkpoints' (docs/auditing.md)
        try:
            obj = msgpack.unpackb(data, raw=False)
            embedded = obj.get("e", []) if isinstance(obj, dict) else []
            bodies = [msgpack.unpackb(b, raw=False) for b in embedded]
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise AuditError(f"{key} is not MessagePack: {exc}") from None
        if not all(isinstance(o, dict) and "f" in o and "k" in o for o in [obj, *bodies]):
            raise AuditError(f"{key} is not a map with a format (f) and a kind (k)")
        found.embedded += len(bodies)
        if kind == "objects":
            if hashlib.sha256(data).hexdigest() != key.rsplit("/", 1)[1]:
                raise AuditError(f"{key} does not hash to its name")
            found.hashed += 1
    namespace = f"threads/{_token(thread_id)}/checkpoints/_/"
    heads = [k for k in keys if k.startswith(namespace) and kind_of(k) == "manifests"]
    if not heads:
        raise AuditError(f"no checkpoint of thread {thread_id!r} under {root}")
    head = _Reader(root / heads[0])  # the first listed is the newest (spec §3.2)
    manifest = msgpack.unpackb((root / heads[0]).read_bytes(), raw=False)
    if manifest["thread_id"] != thread_id:
        raise AuditError(f"{heads[0]} names thread {manifest['thread_id']!r}")
    for message in head.value(manifest["channels"]["messages"]):
        fields = message[2]  # [module, class, fields, constructor]
        found.messages.append((fields["type"], fields["content"]))
    return found


def _account(root: Path, found: Audit, ok: bool, report: VerifyReport) -> list[str]:
    """What is stored, counted by kind, and what the audit and ``verify`` found."""
    rows = [(f"{found.objects[k]} {label}", found.bytes[k]) for k, label in KINDS.items()]
    rows = [row for row, kind in zip(rows, KINDS, strict=True) if found.objects[kind]]
    rows.append((f"{sum(found.objects.values())} objects in all", sum(found.bytes.values())))
    width = max(len(label) for label, _ in rows)
    lines = [f"\nStored under {root} (docs/spec.md §3 says what each key is):"]
    lines += [f"  {label:<{width}} {size:>8} bytes" for label, size in rows]
    lines.append("\nAudited with msgpack and zstandard only, as docs/auditing.md does:")
    lines.append("  every checkpoint object is a MessagePack map with a format and a kind,")
    lines.append(f"  and so are the {found.embedded} objects embedded in manifests")
    if found.hashed:
        lines.append(f"  {found.hashed} content objects hash to their names")
    said = "match" if ok else "DO NOT match"
    lines.append(
        f"  the newest checkpoint's {len(found.messages)} messages, decoded from its bytes,"
        f" {said} the messages read back"
    )
    lines.append(
        f"  verify (the saver's fsck): {report.manifests} manifests, {report.writes} writes,"
        f" {report.objects} content objects, {len(report.problems) or 'no'} problems"
    )
    lines += [f"    {p.key}: {p.kind}: {p.detail}" for p in report.problems]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", nargs="?", default="demo-store")
    parser.add_argument("--thread", default="demo-thread")
    args = parser.parse_args(argv)
    root = Path(args.directory).resolve()
    config = {"configurable": {"thread_id": args.thread}}

    questions = [
        "What is objstore-saver?",
        "Where are my checkpoints?",
        "Can I read them without this library?",
    ]
    # In clear even where OBJSTORE_SAVER_ENCRYPTION_KEY is set: the audit reads the bytes.
    with ObjectStoreSaver.from_directory(root, client_encryption=False) as saver:
        graph = _build_graph(saver)
        for q in questions:
            graph.invoke({"messages": [("user", q)]}, config)

    # A new saver instance, as after a restart: everything comes from disk.
    with ObjectStoreSaver.from_directory(root, client_encryption=False) as saver:
        state = _build_graph(saver).get_state(config)
        read_back = [(m.type, m.content) for m in state.values["messages"]]
        print(f"Conversation {args.thread!r} read back from {root}:")
        for kind, content in read_back:
            print(f"  {kind:>5}: {content}")
        history = list(saver.list(config))
        print(f"\n{len(history)} checkpoints, newest first (step, source):")
        print("  " + ", ".join(f"{t.metadata['step']}/{t.metadata['source']}" for t in history))
        report = saver.verify(args.thread, read_data=True)

    try:
        found = audit(root, args.thread)
    except AuditError as exc:
        print(f"\nAudit FAILED: {exc}")
        return 1
    ok = found.messages == read_back
    for line in _account(root, found, ok, report):
        print(line)
    print(f"\nList them yourself: find {root} -type f | sort")
    return 0 if ok and report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
