from rest_framework.throttling import SimpleRateThrottle


class PerKeyThrottle(SimpleRateThrottle):
    """One budget per API key (or per session user); anonymous callers share one per address."""

    scope = "per_key"

    def get_cache_key(self, request, view):
        auth = request.auth
        key_id = getattr(auth, "throttle_id", None)
        if key_id is not None:
            ident = f"key:{key_id}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            self.rate = self.THROTTLE_RATES.get("anon", self.rate)
            self.num_requests, self.duration = self.parse_rate(self.rate)
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
