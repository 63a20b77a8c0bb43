provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "id" {
  name     = "rg-identity"
  location = "westeurope"
}

resource "azurerm_user_assigned_identity" "app" {
  name                = "id-app"
  location            = azurerm_resource_group.id.location
  resource_group_name = azurerm_resource_group.id.name
}

resource "azurerm_role_assignment" "reader" {
  scope                = azurerm_resource_group.id.id
  role_definition_name = "Reader"
  principal_id         = azurerm_user_assigned_identity.app.principal_id
}

resource "azurerm_role_definition" "restarter" {
  name  = "vm-restarter"
  scope = azurerm_resource_group.id.id

  permissions {
    actions     = ["Microsoft.Compute/virtualMachines/restart/action"]
    not_actions = []
  }

  assignable_scopes = [azurerm_resource_group.id.id]
}
