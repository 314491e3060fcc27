"""The extractor: memories proposed from session transcripts. The trigger and the run (`trigger.py`: request,
coalescing, run, finish), one run's extraction (`extraction.py`), the inbox and its dead letters on disk
(`inbox.py`) and the drain through the controller (`drain.py`). The operator's verbs are in
`memory/services/extractor.py`."""
