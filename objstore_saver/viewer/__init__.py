"""A read-only web viewer of a store (``objstore-saver serve``, extra ``ui``).

:mod:`~objstore_saver.viewer.api` holds the views as pure plans and JSON;
:mod:`~objstore_saver.viewer.pages` renders them as escaped HTML;
:mod:`~objstore_saver.viewer.app` is the Starlette app that runs them, and its token check;
:mod:`~objstore_saver.viewer.reading` holds the reads beyond the CLI's (an
object's referrers), :mod:`~objstore_saver.viewer.longterm` the long-term
store's and :mod:`~objstore_saver.viewer.store_pages` their HTML.
"""
