"""The README describes the code as it is: every module of helpers/ is in its layout."""
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_the_layout_names_every_module_of_helpers():
    layout = _section("Layout")
    for path in sorted((REPO / "helpers").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(REPO / "helpers").with_suffix("")
        name = rel.name if rel.parent == Path(".") else f"{rel.parent}/{rel.name}"
        assert f"`{rel.name}`" in layout or f"`{name}`" in layout, f"helpers/{rel} is not in README's layout"
