"""Business rules of reward-model jobs; views, the API, commands and Celery tasks call these."""
