"""study/published.py: the study's published tables are read as printed, strings kept as strings."""

from study import cost
from study.published import PUBLISHED_DIR, STUDY_KEYS, published


def test_a_published_table_keeps_its_figures_as_printed(tmp_path):
    (tmp_path / "speedup.csv").write_text("device,speedup,note\ntrn1,3.70,\nA100,7.30,NA\n")
    table = published("speedup.csv", tmp_path)
    assert list(table["speedup"]) == ["3.70", "7.30"]  # never 3.7: a figure is compared as the study printed it
    assert list(table["note"]) == ["", "NA"]  # an empty cell and "NA" stay text, never NaN


def test_the_committed_statements_name_every_claims_section():
    statements = published("statements.csv", PUBLISHED_DIR)
    assert {"claim", "quote", "short", "section", "ours", "source"} <= set(statements.columns)
    assert statements["section"].str.startswith("§").all()


def test_every_device_the_study_published_is_a_priced_device_key():
    for table in ("cost.csv", "speedup.csv"):
        assert set(published(table)["device"]) == set(STUDY_KEYS), table
    assert set(STUDY_KEYS.values()) <= set(cost.prices()["device"])
    assert STUDY_KEYS["A100"] == "a100-40gb" and STUDY_KEYS["trn1"] == "trn1-chip"  # the very cards it rented
