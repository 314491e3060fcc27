"""django-q2 tasks. A task holds no logic: it calls one service."""
