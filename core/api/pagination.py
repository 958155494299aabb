from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination


class DefaultPagination(CursorPagination):
    """Newest first, stable while rows are being added (offsets would skip or repeat rows)."""

    ordering = "-id"
    page_size_query_param = "page_size"
    max_page_size = 200

    def decode_cursor(self, request):
        cursor = super().decode_cursor(request)
        # Positions are ids: a forged cursor with anything else is refused, not passed to SQL.
        if (
            cursor is not None
            and cursor.position is not None
            and not (cursor.position.isascii() and cursor.position.isdigit())
        ):
            raise NotFound(self.invalid_cursor_message)
        return cursor


class OldestFirstPagination(DefaultPagination):
    """In the order rows were added: a log reads from its beginning, and its next page holds
    what arrived since."""

    ordering = "id"
