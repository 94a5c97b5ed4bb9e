from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    """``?limit=&offset=`` over id order (stable): at most 1000 rows a page."""

    default_limit = 100
    max_limit = 1000
