from core.api.permissions import session_roles

user_roles = session_roles
