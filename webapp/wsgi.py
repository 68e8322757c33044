"""The production entry point: gunicorn serves `webapp.wsgi:app` (see the Procfile).

`flask --app webapp …` may run with an ephemeral SECRET_KEY so that CLI commands load anywhere;
a production server must not: sessions and CSRF tokens signed with a per-process key break across
gunicorn workers and restarts. So this module refuses to build the app without SECRET_KEY.
"""

from webapp import create_app

app = create_app()
if app.config.get("SECRET_KEY_EPHEMERAL"):
    raise RuntimeError(
        "SECRET_KEY must be set in production (one long random value shared by every web "
        "process, e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`)."
    )
