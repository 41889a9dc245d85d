"""What the project's tests share: running the suite in a subprocess and reading its outcomes
(``suite_runs``), certification runs (``certify_helpers``), the Hugging Face models
(``hf_helpers``), mixed-dtype calls (``mixed_calls``), a torch that reports another release
(``simulate_torch_version``, a ``-p`` plugin) and the torch-free spec load (``torch_free_load``,
run as a script)."""
