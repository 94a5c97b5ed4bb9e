from django.urls import path

app_name = "manage"

urlpatterns: list = []
