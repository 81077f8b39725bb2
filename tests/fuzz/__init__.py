"""The fuzzing campaign (issue 11): hostile and broken models against every CLI command.

`mutator` turns the sample models into broken ones, `graphgen` builds random valid graphs,
`runner` runs cases in capped worker processes and classifies the outcome, `campaign` is the
command line (`python -m tests.fuzz.campaign [--long]`), and `known` is the work queue of
bugs the campaign still finds.
"""
