# The hub image: one image for the hub, the worker and beat (docker-compose.yml picks the command).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 COMPUTEPOOL_VAR_DIR=/var/lib/computepool
WORKDIR /app
COPY requirements/ requirements/
RUN pip install --no-cache-dir -r requirements/base.txt
COPY . .
RUN useradd --system --uid 10001 computepool \
    && mkdir -p /var/lib/computepool && chown computepool /var/lib/computepool \
    && SECRET_KEY=build python manage.py collectstatic --noinput
USER computepool
EXPOSE 8000
CMD ["gunicorn", "computepool.wsgi", "-b", "0.0.0.0:8000", "-w", "4", "-k", "gthread", "--threads", "16", "--timeout", "60"]
