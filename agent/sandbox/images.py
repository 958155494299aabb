"""The operator's image allow-list: which images this agent agrees to run."""

from __future__ import annotations

from dataclasses import dataclass

from agent.sandbox.base import SandboxRefused

# Without an explicit list the agent runs only the project's own images.
DEFAULT_ALLOWED_IMAGES = ("computepool/*",)


def normalize_image(image: str) -> str:
    """`name` means `name:latest`, as it does to Docker; a digest reference is kept as written."""
    last = image.rsplit("/", 1)[-1]
    if "@" in image or ":" in last:
        return image
    return f"{image}:latest"


@dataclass(frozen=True)
class ImagePolicy:
    """Entries are an exact `name:tag`, or a pattern ending in `*` that matches by prefix:
    `name:*` (any tag of one image) or `registry/team/*` (a whole namespace)."""

    patterns: tuple[str, ...]

    @classmethod
    def from_list(cls, allowed: list[str] | None) -> ImagePolicy:
        if allowed is None:
            return cls(DEFAULT_ALLOWED_IMAGES)
        if any(not isinstance(entry, str) or not entry.strip() for entry in allowed):
            raise ValueError("allowed_images entries must be non-empty strings")
        return cls(tuple(entry.strip() for entry in allowed))

    def allows(self, image: str) -> bool:
        if not image or any(char.isspace() for char in image):
            return False
        image = normalize_image(image)
        for pattern in self.patterns:
            if pattern.endswith("*"):
                if image.startswith(pattern[:-1]):
                    return True
            elif image == normalize_image(pattern):
                return True
        return False

    def check(self, image: str) -> None:
        if not self.allows(image):
            allowed = ", ".join(self.patterns) or "nothing"
            raise SandboxRefused(f"image {image!r} is not on this agent's allow-list ({allowed})")
