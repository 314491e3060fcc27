"""Dreaming: the gated background pass that consolidates the memories agents keep recalling into one project
memory, through the controller. Gates (`gates.py`), the runner lock (`lock.py`), candidates (`candidates.py`),
the synthesis (`synthesis.py`), the run (`run.py`) and start-up recovery (`recovery.py`)."""
