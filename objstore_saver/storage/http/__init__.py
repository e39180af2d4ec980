"""HTTP/1.1 plumbing of the lean S3 transport: messages, the answer reader, two pools.

Nothing here knows S3: a pool sends a :class:`~.messages.HttpRequest` to one
origin and hands back an :class:`~.messages.HttpResponse` or a
:class:`~.messages.TransportFailure`; what the answer means is decided in
:mod:`objstore_saver.storage.s3`. :mod:`.sync_pool` is the blocking pool and
what both pools share, :mod:`.async_pool` the asyncio one, :mod:`.reader` the
answer reader both feed, :mod:`.proxy` the forward proxy a pool may go through.
"""
