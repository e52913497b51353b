"""The README is a front page that leads to the docs, and the docs describe the code as it is."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_layout_names_every_module_of_helpers():
    layout = (REPO / "docs" / "LAYOUT.md").read_text()
    for path in sorted((REPO / "helpers").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(REPO / "helpers").with_suffix("")
        name = rel.name if rel.parent == Path(".") else f"{rel.parent}/{rel.name}"
        assert f"`{rel.name}`" in layout or f"`{name}`" in layout, f"helpers/{rel} is not in docs/LAYOUT.md"


def test_every_page_the_readme_links_to_exists_and_the_front_page_stays_short():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(((?!https?:)[^)#]+)\)", readme)
    assert {"docs/PARAMETERS.md", "docs/RUNNING.md", "docs/HARDWARE.md", "docs/STUDY.md", "docs/LAYOUT.md"} <= set(
        links
    )
    assert all((REPO / link).is_file() for link in links), [link for link in links if not (REPO / link).is_file()]
    assert len(readme.splitlines()) <= 100  # read in five minutes; the reference lives in docs/
