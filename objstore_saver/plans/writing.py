"""Sub-plans that write: values encoded, content objects stored (§4, §6.1), and what a
manifest about to be deleted embeds stored alone (§6.9 step 4)."""

from __future__ import annotations

from collections.abc import Collection, Generator, Iterable, Mapping, Sequence
from typing import Any

from objstore_saver.caches import message_keys
from objstore_saver.caches.facts import ElementCache
from objstore_saver.format import codec, keys, list_encoding, split_values, value_encoding
from objstore_saver.format.codec import Encoded, Inline, InlineList, Manifest, PartObj, Ref
from objstore_saver.format.list_encoding import ElementKey, EncodedElement, element_key
from objstore_saver.large_value_gate import Hold
from objstore_saver.plans.context import Context
from objstore_saver.plans.reading import entry_refs
from objstore_saver.plans.requests import Batch, ListKeys, Put, run_batch
from objstore_saver.storage.base import PutMode

#: Bytes of streamed part objects sent per batch while a large value is encoded.
STREAM_WINDOW = 8 * codec.PART_SIZE


class _StreamedFirst:
    """An element cache that answers first from the elements just streamed."""

    def __init__(self, streamed: dict[ElementKey, EncodedElement], inner: ElementCache) -> None:
        self._streamed = streamed
        self._inner = inner

    def get(self, key: ElementKey) -> EncodedElement | None:
        return self._streamed.get(key) or self._inner.get(key)

    def put(self, key: ElementKey, value: EncodedElement) -> None:
        self._inner.put(key, value)


def encode_value(
    ctx: Context,
    pfx: str,
    value: Any,
    *,
    written_once: bool = False,
    written_max: int = codec.WRITE_INLINE_MAX,
    locate: list_encoding.Locator | None = None,
    epoch: int = 0,
) -> Generator[Batch | Hold, list[Any] | None, Encoded]:
    """Sub-plan: entry and objects for one value (spec §4), of the thread's ``epoch``.

    ``written_once``: a pending write's value, also inline up to ``written_max``
    bytes compressed (spec §6.5 step 2). Data larger than a part is streamed,
    under the saver's gate (spec §6.1 step 2.2). ``locate`` places a list's
    element values.
    """
    if not ctx.gate.try_acquire():
        yield Hold(ctx.gate)
    try:
        split = split_values.splits_for(ctx.serde)
        if type(value) is list and value:
            listed = yield from _encode_list(
                ctx,
                pfx,
                value,
                split=split,
                written_max=written_max if written_once else None,
                locate=locate,
                epoch=epoch,
            )
            if listed is not None:
                return listed
        # A list's elements were searched above (none holds a large text).
        holes = split_values.find_holes(value) if split and type(value) is not list else []
        if holes:
            return (yield from encode_split(ctx, pfx, value, holes, epoch=epoch))
        type_, data = ctx.serde.dumps_typed(value)
        if len(data) > codec.PART_SIZE:
            ref, (d, body) = yield from stream_large(
                ctx, pfx, value_encoding.large_objects(type_, data, epoch)
            )
            return Encoded(ref, {d: body})
    finally:
        ctx.gate.release()
    return value_encoding.encode_serialized(
        type_, data, written_once=written_once, written_max=written_max, epoch=epoch
    )


def _encode_list(
    ctx: Context,
    pfx: str,
    value: list[Any],
    *,
    split: bool,
    written_max: int | None,
    locate: list_encoding.Locator | None,
    epoch: int,
) -> Generator[Batch, list[Any] | None, Encoded | None]:
    """Sub-plan: a list element by element (spec §4.4), or None to store it as one value.

    A pending write's list (``written_max`` given) that compresses whole to at
    most ``written_max`` bytes is inline instead (spec §6.5 step 2).
    """
    elements, found = _serialize_elements(ctx, value, split=split)
    if not found and not list_encoding.use_list_encoding(elements):
        return None
    if (
        written_max is not None
        and not found
        and sum(len(data) for _, data in elements) <= WRITE_LIST_WHOLE_MAX
    ):
        payload = codec.make_payload(*ctx.serde.dumps_typed(value))
        whole = value_encoding.inline_written(payload, written_max)
        if whole is not None:
            return whole
    streamed: dict[ElementKey, EncodedElement] = {}
    for i, e in enumerate(value):
        holes = found.get(i)
        if holes:
            enc = yield from encode_split(ctx, pfx, e, holes, epoch=epoch)
            assert isinstance(enc.entry, Ref)
            # Not a serializer's type: the key stands for this element only.
            elements[i] = (_SPLIT_ELEMENT, enc.entry.digest)
            streamed[element_key(elements[i], epoch)] = EncodedElement(
                codec.entry_to_msgpack(enc.entry), enc.entry.digest, enc.objects, enc.children
            )
            continue
        element = elements[i]
        key = element_key(element, epoch)
        if (
            len(element[1]) > codec.PART_SIZE
            and key not in streamed
            and ctx.elements.get(key) is None
        ):
            ref, (d, body) = yield from stream_large(
                ctx, pfx, value_encoding.large_objects(*element, epoch)
            )
            streamed[key] = EncodedElement(codec.entry_to_msgpack(ref), d, {d: body}, {})
    return list_encoding.encode_list(
        elements, _StreamedFirst(streamed, ctx.elements), ctx.elements.sealed, locate, epoch
    )


#: A pending write's list whose elements serialize to at most this many bytes
#: is also compressed whole, to see if it fits inline (spec §6.5 step 2).
WRITE_LIST_WHOLE_MAX = 4 * codec.WRITE_INLINE_MAX


def _serialize_elements(
    ctx: Context, value: list[Any], *, split: bool
) -> tuple[list[tuple[str, bytes]], dict[int, list[tuple[split_values.Path, str]]]]:
    """Each element serialized, and the large texts of those to split (not serialized).

    A message serialized before in the same state (:mod:`~objstore_saver.caches.message_keys`)
    is not serialized again: it was not split then, and holds the same text now.
    """
    memory = ctx.elements.serialized
    if message_keys.applies_to(ctx.serde):
        state_keys, pairs = message_keys.known_pairs(value, memory.get)
    else:
        state_keys, pairs = [None] * len(value), [None] * len(value)
    elements: list[tuple[str, bytes]] = []
    found: dict[int, list[tuple[split_values.Path, str]]] = {}
    for i, e in enumerate(value):
        known = pairs[i]
        if known is not None:
            elements.append(known)
            continue
        key = state_keys[i]
        holes = split_values.find_holes(e) if split else None
        if holes:
            found[i] = holes
            elements.append((_SPLIT_ELEMENT, b""))
            continue
        pair = ctx.serde.dumps_typed(e)
        if key is not None:
            memory.put(key, pair)
        elements.append(pair)
    return elements, found


#: Element key type of a split list element (never a serializer's type).
_SPLIT_ELEMENT = "\0split"


def encode_split(
    ctx: Context,
    pfx: str,
    value: Any,
    holes: list[tuple[split_values.Path, str]],
    *,
    epoch: int = 0,
) -> Generator[Batch, list[Any] | None, Encoded]:
    """Sub-plan: a value with its large message texts stored apart (spec §4.4a): the ``s``
    entry and the small objects."""
    objects: dict[bytes, bytes] = {}
    refs: list[tuple[split_values.Path, Ref]] = []
    for path, text in holes:
        ref, (d, body) = yield from stream_large(ctx, pfx, value_encoding.text_objects(text, epoch))
        objects[d] = body
        refs.append((path, ref))
    rest = value_encoding.encode_serialized(
        *ctx.serde.dumps_typed(split_values.emptied(value, [p for p, _ in holes])), epoch=epoch
    )
    body = codec.encode_split(rest.entry, refs, epoch)
    d = codec.digest_of(body)
    inner = [rest.entry.digest] if isinstance(rest.entry, Ref) else []
    children = {**rest.children, d: (*inner, *(r.digest for _, r in refs))}
    return Encoded(Ref("s", d), {**rest.objects, **objects, d: body}, children)


def stream_large(
    ctx: Context, pfx: str, stream: Generator[tuple[bytes, bytes], None, value_encoding.LargeResult]
) -> Generator[Batch, list[Any] | None, tuple[Ref, tuple[bytes, bytes]]]:
    """Sub-plan: store the parts of large data as ``stream`` produces them (spec §4.3), a
    :data:`STREAM_WINDOW` at a time; the entry and the container, stored by the caller."""
    window: dict[bytes, Put] = {}
    pending = 0
    while True:
        try:
            d, part = next(stream)
        except StopIteration as done:
            ref, container, _parts = done.value
            break
        if ctx.objects.known(pfx, d, ctx.belief_age):
            continue
        window[d] = Put(keys.object_key_in(pfx, d), part)
        pending += len(part)
        if pending >= STREAM_WINDOW:
            yield from put_objects(ctx, pfx, window, parts=True)
            window, pending = {}, 0
    yield from put_objects(ctx, pfx, window, parts=True)
    return ref, container


def put_objects(
    ctx: Context,
    pfx: str,
    puts: Mapping[bytes, Put],
    extra: Sequence[Put | ListKeys] = (),
    *,
    parts: bool = False,
) -> Generator[Batch, list[Any] | None, list[Any]]:
    """Sub-plan: PUT content-addressed objects (digest → PUT) create-only, and remember them
    (``parts`` only as stored); the results of ``extra``, sent in the same batch."""
    created = yield from run_batch(*puts.values(), *extra)
    # An old object we did not write may be marked by a prune (§6.9): PUT again, the
    # same bytes, it renews its LastModified.
    renew = []
    for put_op, ok in zip(puts.values(), created[: len(puts)], strict=True):
        if not ok:
            renew.append(Put(put_op.key, put_op.data, PutMode.OVERWRITE))
    if renew:
        yield from run_batch(*renew)
    if parts:
        ctx.objects.add_known(pfx, list(puts))
        return created[len(puts) :]
    for d, put_op in puts.items():
        obj = codec.decode_object(put_op.data, put_op.key)
        if isinstance(obj, PartObj):
            ctx.objects.add_known(pfx, [d])
        else:
            ctx.objects.add(pfx, d, obj)
    return created[len(puts) :]


def store_objects(
    ctx: Context,
    pfx: str,
    encoded: Sequence[Encoded],
    extra: Sequence[Put | ListKeys] = (),
    *,
    embedded: Collection[bytes] = (),
    located: Collection[bytes] = (),
) -> Generator[Batch, list[Any] | None, list[Any]]:
    """Sub-plan: PUT create-only the objects not known to be stored, in parallel; the results
    of ``extra``, sent in the same batch.

    Nothing below an object known stored is walked: a stored container implies
    its children are (write order). Of the entries and their lists' segments'
    elements, one in ``located`` is held by an earlier manifest, one in
    ``embedded`` travels in the manifest about to be written.
    """
    bodies: dict[bytes, bytes] = {}
    children: dict[bytes, tuple[bytes, ...]] = {}
    # (digest, whether the reference to it may carry a location)
    stack: list[tuple[bytes, bool]] = []
    segments: set[bytes] = set()
    for enc in encoded:
        bodies.update(enc.objects)
        children.update(enc.children)
        if not isinstance(enc.entry, Inline):  # an inline value references nothing
            for _, d in entry_refs([enc.entry]):
                stack.append((d, True))
        if isinstance(enc.entry, InlineList):
            segments.update(g.digest for g in enc.entry.obj.segments)
    seen: set[tuple[bytes, bool]] = set()
    puts: dict[bytes, Put] = {}
    while stack:
        d, placed = stack.pop()
        if (d, placed) in seen:
            continue
        seen.add((d, placed))
        if placed and d in located:
            continue
        if placed and d in embedded:
            stack.extend((c, d in segments) for c in children.get(d, ()))
            continue
        if d in puts or ctx.objects.known(pfx, d, ctx.belief_age):
            continue
        puts[d] = Put(keys.object_key_in(pfx, d), bodies[d])
        stack.extend((c, d in segments) for c in children.get(d, ()))
    if not puts and not extra:
        return []
    return (yield from put_objects(ctx, pfx, puts, extra))


def embedded_in(manifests: Iterable[Manifest]) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for m in manifests:
        out.update(codec.embedded_objects(m))
    return out


def store_embedded(
    ctx: Context, pfx: str, objects: Mapping[bytes, bytes]
) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: store what a manifest embeds alone at ``objects/<H>`` before it is deleted
    (spec §6.9 step 4), reached or not; only once it returns may the manifests go."""
    puts = {d: Put(keys.object_key_in(pfx, d), objects[d]) for d in sorted(objects)}
    yield from put_objects(ctx, pfx, puts)
