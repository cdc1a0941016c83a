"""The write path every surface calls: validate → size → seal → outbox → produce → position.

:class:`~memstream.intake.service.Intake` returns an :data:`~memstream.intake.outcomes.Outcome`:
:class:`~memstream.intake.outcomes.Accepted` with the write's position, or one typed refusal.
"""

from memstream.intake.outcomes import Accepted, Outcome, Refusal
from memstream.intake.service import Intake

__all__ = ["Accepted", "Intake", "Outcome", "Refusal"]
