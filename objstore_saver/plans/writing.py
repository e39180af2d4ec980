"""Sub-plans that write: values encoded into entries and content objects stored (spec §4, §6.1).

The plans ``put`` and ``put_writes`` that use them are in
:mod:`objstore_saver.plans.checkpoint_put`.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Mapping, Sequence
from typing import Any

from objstore_saver.caches import message_keys
from objstore_saver.caches.facts import ElementCache
from objstore_saver.format import codec, keys, list_encoding, split_values, value_encoding
from objstore_saver.format.codec import (
    Encoded,
    Inline,
    InlineList,
    PartObj,
    Ref,
)
from objstore_saver.format.list_encoding import ElementKey, EncodedElement, element_key
from objstore_saver.large_value_gate import Hold
from objstore_saver.plans.context import Context
from objstore_saver.plans.reading import (
    entry_refs,
)
from objstore_saver.plans.requests import (
    Batch,
    ListKeys,
    Put,
    run_batch,
)
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
    """Sub-plan: entry and objects for one value (spec §4).

    ``written_once`` is for the value of a pending write, whose entry is
    stored in one object and never carried on to another: it is also inline
    when its compressed payload is at most ``written_max`` bytes (spec §6.5
    step 2).

    Data larger than a part is streamed: its part objects are stored while
    the compressor produces them (:func:`stream_large`), so the returned
    :class:`Encoded` holds only small objects. A value holding a very large
    message text is split (:func:`encode_split`, spec §4.4a): the serializer
    never sees the text. The value is serialized under the saver's gate,
    kept while large data is streamed (spec §6.1 step 2.2). ``locate``
    places a list's element values (:class:`list_encoding.Locator`). The
    objects belong to the thread's ``epoch`` (spec §4.11).
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
    """Sub-plan of :func:`encode_value`: a list element by element (spec §4.4), or None.

    None when the list is stored as one value (small, or small elements) and
    none of its elements holds a large text. Elements with large texts are
    found first and split; the others are serialized, and those larger than
    a part are streamed before the list is encoded. A pending write's list
    (``written_max`` given) that compresses whole to at most ``written_max``
    bytes is inline instead (spec §6.5 step 2).
    """
    elements, found = _serialize_elements(ctx, value, split=split)
    if not found and not list_encoding.use_list_encoding(elements):
        return None
    if written_max is not None and not found:
        whole = _whole_list_inline(ctx, value, elements, written_max)
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


def _whole_list_inline(
    ctx: Context, value: list[Any], elements: list[tuple[str, bytes]], limit: int
) -> Encoded | None:
    """The list as one inline entry, if it compresses to at most ``limit``; else None."""
    if sum(len(data) for _, data in elements) > WRITE_LIST_WHOLE_MAX:
        return None
    return value_encoding.inline_written(codec.make_payload(*ctx.serde.dumps_typed(value)), limit)


def _serialize_elements(
    ctx: Context, value: list[Any], *, split: bool
) -> tuple[list[tuple[str, bytes]], dict[int, list[tuple[split_values.Path, str]]]]:
    """Each element serialized, and the large texts of those to split (not serialized).

    A message serialized before by this process, in the same state, is not
    serialized again (:mod:`objstore_saver.caches.message_keys`): it was not split
    then, and it holds the same text now.
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
        holes = split_values.holes_of_element(e) if split else None
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
    """Sub-plan: a value with its large message texts stored apart (spec §4.4a).

    Each text's parts are stored as they are made (:func:`stream_large`);
    the value is serialized with those texts emptied. Returns the ``s``
    entry and the small objects (split object, text containers, value).
    """
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
    ctx: Context,
    pfx: str,
    stream: Generator[tuple[bytes, bytes], None, value_encoding.LargeResult],
) -> Generator[Batch, list[Any] | None, tuple[Ref, tuple[bytes, bytes]]]:
    """Sub-plan: store the parts of large data as ``stream`` produces them (spec §4.3).

    ``stream`` is :func:`value_encoding.large_objects` or ``text_objects``.
    Parts go out create-only in batches of about :data:`STREAM_WINDOW` bytes
    and are dropped once stored, so a put holds one window of parts, not the
    whole value twice. Returns the entry and the container object (``parts``,
    or ``value`` when the compressed data fits one part), which the caller
    stores after its parts like any other object.
    """
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
    """Sub-plan: PUT content-addressed objects create-only, in parallel, and remember them.

    ``puts`` maps each object's digest to its PUT. ``exists`` is success,
    the key being the hash of the bytes; the object is then re-PUT in
    overwrite mode with the same bytes, which renews its ``LastModified`` so
    a pending sweep mark no longer applies to it (§6.9). Written objects are
    remembered decoded, so reading them back costs no request; ``parts``
    (a large value's part objects) are remembered only as stored. ``extra``
    requests (run markers, a LIST) go in the same batch; their results are
    returned.
    """
    created = yield from run_batch(*puts.values(), *extra)
    # An old object we did not write may be marked by a prune (§6.9): renew it.
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
    """Sub-plan: PUT create-only the objects not known to be stored, in parallel.

    The walk starts at each entry and does not descend below an object known
    to be stored (confirmed within ``ctx.belief_age``; in a distrusting
    context none is): a stored container implies its children are (write
    order). Parts
    streamed by :func:`stream_large` are not among an :class:`Encoded`'s
    children: they were stored before their container, in this attempt.
    A segment or value in ``located`` is held by an earlier manifest, stored
    with what it holds (that manifest was written after them); one in
    ``embedded`` travels in the manifest about to be written, so only what
    it holds is stored here. Locations apply where references carry them:
    the entries themselves and the elements of their lists' segments; an
    object reached from any other object is stored alone. ``extra``
    requests go in the same batch; their results are returned.
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
