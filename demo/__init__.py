"""The demo campaigns' loader and ``manage.py demo``: a project app of its own, since it fills both apps
(``annotate``'s campaigns and labels, ``rewards``' candidate pools)."""
