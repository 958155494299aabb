from rest_framework.pagination import CursorPagination


class DefaultPagination(CursorPagination):
    """Newest first, stable while rows are being added (offsets would skip or repeat rows)."""

    ordering = "-id"
    page_size_query_param = "page_size"
    max_page_size = 200
