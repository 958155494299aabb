"""WhiteNoise, able to run in an async chain.

WhiteNoise's middleware is sync only. Under ASGI (the relay's hub processes) one sync
middleware makes Django hop each request into a thread and back, which costs every token an
agent pushes and every stream a client opens. This subclass answers in the mode of the chain
it is in; what it does is WhiteNoise's own.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response=None) -> None:
        super().__init__(get_response)
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self._async:
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request):
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)
