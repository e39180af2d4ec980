"""HTTP/1.1 plumbing of the lean S3 transport: messages, the answer reader, two pools.

Nothing here knows S3: a pool sends a request (:mod:`.messages`) to one origin and
hands back the answer or a failure. :mod:`.sync_pool` is the blocking pool and what
both pools share, :mod:`.async_pool` the asyncio one, :mod:`.reader` the answer
reader both feed, :mod:`.proxy` the forward proxy a pool may go through.
"""
