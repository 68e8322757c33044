"""How Intake's processes are started, watched and stopped outside a Procfile host: the dev
runner behind `flask --app webapp dev` (Redis, supervised workers, the web app), and the
process tools the tests and benchmarks share with it. Imports the top of jobs only."""
