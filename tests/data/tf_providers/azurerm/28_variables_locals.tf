provider "azurerm" {
  features {}
}

variable "location" {
  type    = string
  default = "westeurope"
}

variable "environments" {
  type    = list(string)
  default = ["dev", "staging"]
}

locals {
  common_tags = {
    owner = "platform"
  }
}

resource "azurerm_resource_group" "env" {
  for_each = toset(var.environments)
  name     = "rg-${each.key}"
  location = var.location
  tags     = local.common_tags
}

output "group_ids" {
  value = [for g in azurerm_resource_group.env : g.id]
}
