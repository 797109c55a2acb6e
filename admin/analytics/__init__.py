"""The admin analytics pages under /admin/analytics (admin.analytics.pages), with their
templates and static files beside them; admin.blueprint.admin_blueprints nests `analytics_pages_bp`
in the admin's blueprint."""
from admin.analytics.pages import analytics_pages_bp

__all__ = ["analytics_pages_bp"]
