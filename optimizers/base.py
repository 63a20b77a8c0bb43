"""The engine protocol lives in the kernel (`verifirst.engine`); these names stay importable here."""
from verifirst.engine import Budget, Engine, EngineContext, EngineResult, TeleprompterEngine

__all__ = ["Budget", "Engine", "EngineContext", "EngineResult", "TeleprompterEngine"]
