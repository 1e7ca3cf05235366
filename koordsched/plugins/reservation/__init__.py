"""Reservation (Koordinator v1.6): reserve capacity ahead of the pods that will use it."""

from koordsched.plugins.reservation.args import ReservationArgs
from koordsched.plugins.reservation.plugin import Reservation
from koordsched.plugins.reservation.report import ReservationResult, reservation_results

__all__ = ["Reservation", "ReservationArgs", "ReservationResult", "reservation_results"]
