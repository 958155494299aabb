"""{{ form|fields_named:"a b c" }}: a form's bound fields in the order named, so a long form
can be laid out in groups."""

from django import template

register = template.Library()


@register.filter
def fields_named(form, names: str) -> list:
    return [form[name] for name in names.split()]
