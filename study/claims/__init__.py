"""The study's claims checked against the records, graded by the evidence they rest on."""
