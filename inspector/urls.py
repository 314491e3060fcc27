from __future__ import annotations

from django.urls import path

from . import views

app_name = "inspector"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("signin", views.signin_view, name="signin"),
    path("signout", views.signout_view, name="signout"),
    path("reindex", views.reindex, name="reindex"),
    path("jobs/<str:job_id>", views.job_detail, name="job"),
    path("memories/", views.memory_list, name="memories"),
    path("memories/new", views.memory_create, name="memory_new"),
    path("memories/<path:filename>/edit", views.memory_edit, name="memory_edit"),
    path("memories/<path:filename>/delete", views.memory_delete, name="memory_delete"),
    path("memories/<path:filename>", views.memory_detail, name="memory"),
    path("recall", views.recall_playground, name="recall"),
    path("decisions/", views.decision_list, name="decisions"),
    path("decisions/<str:decision_id>/revert", views.decision_revert, name="decision_revert"),
    path("decisions/<str:decision_id>", views.decision_detail, name="decision"),
    path("events/", views.event_list, name="events"),
    path("snapshots/", views.snapshot_view, name="snapshots"),
    path("dreaming/", views.dreaming, name="dreaming"),
    path("dreaming/trigger", views.dream_trigger, name="dream_trigger"),
    path("dreaming/<str:run_id>/retry", views.dream_retry, name="dream_retry"),
    path("dreaming/<str:run_id>", views.dream_detail, name="dream"),


    path("extractor/", views.extractor_view, name="extractor"),
    path("extractor/drain", views.extractor_drain, name="extractor_drain"),
    path("extractor/failures/<str:failure>/replay", views.extractor_replay, name="extractor_replay"),
    path("extractor/sessions/<str:session_id>", views.extractor_session, name="extractor_session"),
    path("extractor/sessions/<str:session_id>/replay", views.extractor_replay_session,
         name="extractor_replay_session"),


    path("sessions/", views.session_list, name="sessions"),
    path("sessions/<str:session_id>", views.session_detail, name="session"),
]
