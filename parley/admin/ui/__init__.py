"""The dashboard at /admin: server-rendered pages over ``AdminService``."""
