"""The engine protocol lives in the kernel (`verifirst.core.engine`); these names stay importable here."""
from verifirst.core.engine import Budget, Engine, EngineContext, EngineResult, TeleprompterEngine

__all__ = ["Budget", "Engine", "EngineContext", "EngineResult", "TeleprompterEngine"]
