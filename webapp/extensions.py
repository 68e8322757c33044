"""Accessors for what create_app puts in app.extensions."""

from __future__ import annotations

from flask import current_app

from jobs import Intake, Settings


def intake() -> Intake:
    return current_app.extensions["intake"]


def settings() -> Settings:
    return current_app.config["INTAKE"]
