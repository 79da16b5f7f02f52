"""`python -m pressloop.local_model prepare | needed`: the offline model made ready for `make run`.

The model file itself (fetched once, assembled, checked) is the provider's business
(`pressloop.providers.local.model_file`); this package is a command on top of everything: it
builds the default catalog's system prompt (`prompt.py`) and has the provider save its state.
"""
