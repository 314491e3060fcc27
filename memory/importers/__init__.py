"""Readers of other tools' memory and history, for `compozy import …`. They read, never write: what they find
goes through the services to the controller and the session ledger like any other write."""
