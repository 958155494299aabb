from django.urls import path

from inference import api, relay_views

urlpatterns = [
    path("models", api.ModelsApi.as_view(), name="v1-models"),
    path("chat/completions", relay_views.ChatCompletions.as_view(), name="v1-chat-completions"),
    path("completions", relay_views.Completions.as_view(), name="v1-completions"),
]
