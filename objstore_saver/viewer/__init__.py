"""A read-only web viewer of a store (``objstore-saver serve``, extra ``ui``).

:mod:`~objstore_saver.viewer.api` holds the views as pure plans and JSON;
:mod:`~objstore_saver.viewer.pages` renders them as escaped HTML;
:mod:`~objstore_saver.viewer.app` is the Starlette app and its token check.
"""
