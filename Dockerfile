# One image for web, worker, beat and the GPU trainer (the trainer adds the `train` extra).
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
ARG EXTRAS=""
RUN pip install -e ".${EXTRAS}"
RUN DJANGO_SETTINGS_MODULE=steplab.settings_production SECRET_KEY=build python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "steplab.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "4"]
