"""Reservation (Koordinator v1.6): reserve capacity ahead of the pods that will use it."""

from koordsched.plugins.reservation.args import ReservationArgs
from koordsched.plugins.reservation.controller import expiry_updates, next_expiry, owner_updates
from koordsched.plugins.reservation.plugin import Reservation

__all__ = ["Reservation", "ReservationArgs", "expiry_updates", "next_expiry", "owner_updates"]
