from django.apps import AppConfig


class RewardsConfig(AppConfig):
    name = "rewards"
    verbose_name = "Reward models and datasets"
