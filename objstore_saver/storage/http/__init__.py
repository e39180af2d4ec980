"""HTTP/1.1 plumbing of the lean S3 transport: messages, the answer reader, two pools.

Nothing here knows S3: a pool sends a :class:`~.messages.HttpRequest` to one
origin and hands back an :class:`~.messages.HttpResponse` or a
:class:`~.messages.TransportFailure`; what the answer means is decided in
:mod:`objstore_saver.storage.s3`. :mod:`.sync_pool` and :mod:`.async_pool` are
the blocking and the asyncio pools, :mod:`.connection_cap` what they share,
:mod:`.proxy` the forward proxy a pool may go through.
"""
