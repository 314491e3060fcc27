"""The inspector's forms, generated from the services' input models as the CLI's flags and the MCP schemas are:
one field per model field, named after it, with the field's description as its help text, its enum or Literal
values as the choices, its bounds on a number, and required when the model requires it. Nothing here declares a
field: a page names its input model and the fields it leaves out (with why), so a field added to a model is a new
control on every page that offers that model.

What stays here is presentation only: which widget a field gets (a text area for a body, the known-workspace
select for `workspace`) and a short label where the field name reads badly as one."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from annotated_types import Ge, Le, MaxLen
from pydantic.fields import FieldInfo

from memory.services.inputs import choices_of, unwrap_optional

# Shorter labels where the humanised field name reads badly; every other label is the field name in words.
LABELS = {
    "agent_name": "Agent",
    "top_k": "Top K",
    "include_system": "Include _system/",
    "limit": "Per page",
    "session_id": "Session id",
    "content": "Content (Markdown)",
}
# Widgets other than the one the field's type gives.
# The agent is typed or picked from the agents holding memories (a new agent's first write types its name).
WIDGETS = {"content": "textarea", "query": "search", "workspace": "workspace", "agent_name": "agent"}
# Never a control: the pager carries the cursor, an empty workspace select means every workspace, list pages
# always ask for the full item, and a write's preview is its own confirmation page.
NEVER_SHOWN = frozenset({"cursor", "all_workspaces", "detail", "dry_run", "create_workspace"})


@dataclass(frozen=True)
class FormField:
    name: str
    label: str
    help: str
    widget: str  # text, search, textarea, number, checkbox, select or workspace
    required: bool
    choices: tuple[str, ...] = ()
    default: str = ""  # the model's default as the form shows it ("" for none)
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None

    @property
    def help_id(self) -> str:
        return f"{self.name}-help"


@dataclass(frozen=True)
class Form:
    """The controls of one page's form, and the names it reads back from the request (`extra`: read but not
    shown, such as the pager's cursor)."""

    model: type[Any]
    fields: tuple[FormField, ...]
    extra: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(field.name for field in self.fields)

    def read(self, source: Mapping[str, Any]) -> dict[str, Any]:
        """The non-empty values of this form's fields in a query string or posted form ("not given" when empty)."""
        return {name: source.get(name) for name in (*self.names, *self.extra)
                if source.get(name) not in (None, "")}




def _bound(info: FieldInfo, kind: type) -> Any:
    for item in info.metadata:
        if isinstance(item, kind):
            return getattr(item, {Ge: "ge", Le: "le", MaxLen: "max_length"}[kind])
    return None


def field_of(name: str, info: FieldInfo) -> FormField | None:
    """The control for one model field, or None for a field no form can carry (a list, an object)."""
    annotation = unwrap_optional(info.annotation)
    choices = choices_of(annotation)
    if name in WIDGETS:
        widget = WIDGETS[name]
    elif choices is not None:
        widget = "select"
    elif annotation is bool:
        widget = "checkbox"
    elif annotation is int:
        widget = "number"
    elif annotation is str:
        widget = "text"
    else:
        return None
    default = info.get_default(call_default_factory=True) if not info.is_required() else None
    if isinstance(default, enum.Enum):
        default = default.value
    shown_default = "" if default in (None, False) else str(default)
    return FormField(name=name, label=LABELS.get(name, name.replace("_", " ").capitalize()),
                     help=info.description or "", widget=widget, required=info.is_required(),
                     choices=choices or (), default=shown_default, minimum=_bound(info, Ge), maximum=_bound(info, Le),
                     max_length=_bound(info, MaxLen))


def form_of(model: type[Any], *, leave_out: frozenset[str] | set[str] = frozenset(),
            extra: tuple[str, ...] = (), first: tuple[str, ...] = ()) -> Form:
    """The form for `model`: every field but NEVER_SHOWN and `leave_out`, in the model's order except `first`
    (the field a page is for, such as recall's query, leads)."""
    names = [*(name for name in first if name in model.model_fields),
             *(name for name in model.model_fields if name not in first)]
    fields = []
    for name in names:
        info = model.model_fields[name]
        if name in NEVER_SHOWN or name in leave_out:
            continue
        field = field_of(name, info)
        if field is not None:
            fields.append(field)
    return Form(model=model, fields=tuple(fields), extra=extra)
