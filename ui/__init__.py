"""`hs ui`: a read-only web explorer of the trajectory database (Starlette + Jinja2, served by uvicorn).

Pages: runs, a training run's updates, an update's groups (a dead H0 group beside its rescue), a
trajectory with its turns and token view, and side-by-side comparisons. Every text a model, an
editor or a harness wrote is escaped (Jinja2 autoescape); the database is opened read-only.
"""
