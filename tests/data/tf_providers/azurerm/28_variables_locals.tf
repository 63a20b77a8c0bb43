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

resource "azurerm_log_analytics_workspace" "env" {
  for_each            = azurerm_resource_group.env
  name                = "law-${each.key}"
  location            = each.value.location
  resource_group_name = each.value.name
  retention_in_days   = 30

  identity {
    type = "SystemAssigned"
  }
}
