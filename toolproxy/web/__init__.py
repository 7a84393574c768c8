"""The Flask app factory and its blueprints (api, pages, dashboard); templates and static files ship here."""
