"""Builders for inference tests."""

# A price book in force that prices models' tokens, as an admin publishes one.
from inference.catalog import token_prices_publish as price_tokens

__all__ = ["price_tokens"]
