from django.urls import include, path

from . import views

app_name = "annotate"

#: what a labeler does on one pass (the workspace's buttons, its heartbeat, the next solution), by URL name; each
#: is a POST to assignments/<id>/<its name, hyphenated>
PASS_ACTIONS = {"rate": views.rate, "flag": views.flag, "bad_split": views.bad_split, "decide": views.decide,
                "finish": views.finish, "next": views.next_solution, "heartbeat": views.heartbeat,
                "resume": views.resume, "outcome": views.outcome}

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("invitations/", views.invitations, name="invitations"),
    path("c/<slug:slug>/", views.campaign_page, name="campaign"),
    path("c/<slug:slug>/start", views.start, name="start"),
    path("assignments/<id:assignment_id>/", include([  # one labeler's pass: the workspace and what it does
        path("", views.workspace, name="workspace"),
        *[path(name.replace("_", "-"), view, name=name) for name, view in PASS_ACTIONS.items()],
    ])),
]
